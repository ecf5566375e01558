/*
 * Made-up series for `promtool test rules`, and what each alert of components/monitoring must
 * (not) do with them: one test group per situation.
 */

export const JOB = 'job="image-task-sidecar"';

/** A promtool unit test file (`promtool test rules`). */
export interface RuleTests {
  rule_files: string[];
  evaluation_interval: string;
  tests: Array<{
    interval: string;
    input_series: Array<{ series: string; values: string }>;
    alert_rule_test: Array<{
      eval_time: string;
      alertname: string;
      exp_alerts: Array<{ exp_labels: Record<string, string> }>;
    }>;
  }>;
}

/** Made-up series and what each alert must (not) do with them; one promtool test group. */
export const UNIT_TESTS: RuleTests = {
  rule_files: ["rules.yaml"],
  evaluation_interval: "1m",
  tests: [
    {
      interval: "1m",
      input_series: [
        // Two replicas report the same growing queue (2 more a minute); another stays flat.
        ...["a", "b"].map((pod) => ({
          series: `image_task_sidecar_task_queue_depth{namespace="growing",${JOB},pod="${pod}"}`,
          values: "0+2x60",
        })),
        {
          series: `image_task_sidecar_task_queue_depth{namespace="flat",${JOB},pod="a"}`,
          values: "50x60",
        },
      ],
      alert_rule_test: [
        // 20 waiting: not yet above the threshold.
        { eval_time: "10m", alertname: "ImageTaskSidecarQueueBacklogGrowing", exp_alerts: [] },
        // Pending from 11m, firing 15 minutes later; the flat queue, however long, does not.
        { eval_time: "20m", alertname: "ImageTaskSidecarQueueBacklogGrowing", exp_alerts: [] },
        {
          eval_time: "40m",
          alertname: "ImageTaskSidecarQueueBacklogGrowing",
          exp_alerts: [
            {
              exp_labels: { severity: "warning", namespace: "growing", job: "image-task-sidecar" },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // Half the tasks that could succeed fail; the many cancels count for nothing.
        ["failing", "completed", "ok", "0+1x60"],
        ["failing", "failed", "upstream_error", "0+1x60"],
        ["failing", "failed", "cancelled", "0+5x60"],
        // 1 in 11 fails: below 20 %.
        ["healthy", "completed", "ok", "0+10x60"],
        ["healthy", "failed", "timeout", "0+1x60"],
      ].map(([namespace, status, reason, values]) => ({
        series: `image_task_sidecar_tasks_finished_total{namespace="${namespace}",${JOB},status="${status}",reason="${reason}"}`,
        values: values!,
      })),
      alert_rule_test: [
        {
          eval_time: "40m",
          alertname: "ImageTaskSidecarTaskFailureRatioHigh",
          exp_alerts: [
            {
              exp_labels: { severity: "warning", namespace: "failing", job: "image-task-sidecar" },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // The image store goes away at 2m on one replica; the task store stays.
        {
          series: `image_task_sidecar_store_up{namespace="n",${JOB},pod="a",store="images"}`,
          values: "1 1 0x10",
        },
        {
          series: `image_task_sidecar_store_up{namespace="n",${JOB},pod="b",store="images"}`,
          values: "1x12",
        },
        {
          series: `image_task_sidecar_store_up{namespace="n",${JOB},pod="a",store="tasks"}`,
          values: "1x12",
        },
      ],
      alert_rule_test: [
        { eval_time: "3m", alertname: "ImageTaskSidecarStoreUnavailable", exp_alerts: [] },
        {
          eval_time: "5m",
          alertname: "ImageTaskSidecarStoreUnavailable",
          exp_alerts: [
            {
              exp_labels: {
                severity: "critical",
                namespace: "n",
                job: "image-task-sidecar",
                store: "images",
              },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // One replica stops reaching channel "primary" at 2m; the other, and "backup", are fine.
        {
          series: `image_task_sidecar_channel_up{namespace="n",${JOB},pod="a",channel="primary"}`,
          values: "1 1 0x10",
        },
        {
          series: `image_task_sidecar_channel_up{namespace="n",${JOB},pod="b",channel="primary"}`,
          values: "1x12",
        },
        {
          series: `image_task_sidecar_channel_up{namespace="n",${JOB},pod="a",channel="backup"}`,
          values: "1x12",
        },
      ],
      alert_rule_test: [
        // Down for 4 minutes: not yet.
        { eval_time: "6m", alertname: "ImageTaskSidecarChannelDown", exp_alerts: [] },
        {
          eval_time: "8m",
          alertname: "ImageTaskSidecarChannelDown",
          exp_alerts: [
            {
              exp_labels: {
                severity: "warning",
                namespace: "n",
                job: "image-task-sidecar",
                channel: "primary",
              },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // 2 in 12 passthrough answers are 502s.
        ["failing", "/v1/chat/completions", "200", "0+10x40"],
        ["failing", "/v1/chat/completions", "502", "0+2x40"],
        // Only task routes fail (their own 503s, with their own alerts); passthrough is fine.
        ["tasks", "/v1/chat/completions", "200", "0+10x40"],
        ["tasks", "/v1/images/tasks", "503", "0+10x40"],
        // Clients hanging up are no server error.
        ["aborting", "/v1/embeddings", "200", "0+10x40"],
        ["aborting", "/v1/embeddings", "aborted", "0+10x40"],
        // Too few answers to judge: 1 in 2 failing, 10 in 10 minutes.
        ["quiet", "/v1/images/generations", "200", "0+0.5x40"],
        ["quiet", "/v1/images/generations", "504", "0+0.5x40"],
      ].map(([namespace, route, status, values]) => ({
        series: `image_task_sidecar_http_requests_total{namespace="${namespace}",${JOB},route="${route}",method="POST",status="${status}"}`,
        values: values!,
      })),
      alert_rule_test: [
        {
          eval_time: "30m",
          alertname: "ImageTaskSidecarPassthroughErrorsHigh",
          exp_alerts: [
            {
              exp_labels: {
                severity: "critical",
                namespace: "failing",
                job: "image-task-sidecar",
              },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // One delivery given up at 10m (counted from 0); another namespace gives up none.
        {
          series: `image_task_sidecar_webhook_deliveries_total{namespace="n",${JOB},result="exhausted"}`,
          values: "0x10 1x100",
        },
        {
          series: `image_task_sidecar_webhook_deliveries_total{namespace="n",${JOB},result="delivered"}`,
          values: "0+5x110",
        },
        {
          series: `image_task_sidecar_webhook_deliveries_total{namespace="fine",${JOB},result="exhausted"}`,
          values: "0x110",
        },
      ],
      alert_rule_test: [
        { eval_time: "5m", alertname: "ImageTaskSidecarWebhooksGivenUp", exp_alerts: [] },
        {
          eval_time: "15m",
          alertname: "ImageTaskSidecarWebhooksGivenUp",
          exp_alerts: [
            {
              exp_labels: { severity: "warning", namespace: "n", job: "image-task-sidecar" },
            },
          ],
        },
        // An hour later it is over.
        { eval_time: "80m", alertname: "ImageTaskSidecarWebhooksGivenUp", exp_alerts: [] },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // Replica a's loop runs 0.8 s late from the start; b's idles at a few milliseconds.
        {
          series: `image_task_sidecar_nodejs_eventloop_lag_p99_seconds{namespace="n",${JOB},pod="a"}`,
          values: "0.8x20",
        },
        {
          series: `image_task_sidecar_nodejs_eventloop_lag_p99_seconds{namespace="n",${JOB},pod="b"}`,
          values: "0.004x20",
        },
      ],
      alert_rule_test: [
        // Pending, not yet 10 minutes.
        { eval_time: "5m", alertname: "ImageTaskSidecarEventLoopLagHigh", exp_alerts: [] },
        {
          eval_time: "12m",
          alertname: "ImageTaskSidecarEventLoopLagHigh",
          exp_alerts: [
            {
              exp_labels: {
                severity: "warning",
                namespace: "n",
                job: "image-task-sidecar",
                pod: "a",
              },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // 2 tasks completed a minute; channel "mangler" leaves an image out every 5 minutes from
        // 10m (12 an hour: 10 % of 120 tasks), "fine" none. Namespace "few" completes 5 an hour.
        {
          series: `image_task_sidecar_tasks_finished_total{namespace="n",${JOB},status="completed"}`,
          values: "0+2x120",
        },
        {
          series: `image_task_sidecar_task_images_missing_total{namespace="n",${JOB},channel="mangler"}`,
          values: "0x10 0+0.2x110",
        },
        {
          series: `image_task_sidecar_task_images_missing_total{namespace="n",${JOB},channel="fine"}`,
          values: "0x120",
        },
        {
          series: `image_task_sidecar_tasks_finished_total{namespace="few",${JOB},status="completed"}`,
          values: "0+0.08x120",
        },
        {
          series: `image_task_sidecar_task_images_missing_total{namespace="few",${JOB},channel="x"}`,
          values: "0+0.05x120",
        },
      ],
      alert_rule_test: [
        // Pending first: 15 minutes above 5 %.
        { eval_time: "20m", alertname: "ImageTaskSidecarImagesMissing", exp_alerts: [] },
        {
          eval_time: "60m",
          alertname: "ImageTaskSidecarImagesMissing",
          exp_alerts: [
            {
              exp_labels: {
                severity: "warning",
                namespace: "n",
                job: "image-task-sidecar",
                channel: "mangler",
              },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // Replica a's scrapes fail from 2m; b's succeed.
        {
          series: `up{namespace="n",${JOB},pod="a",instance="10.0.0.1:9464"}`,
          values: "1 1 0x10",
        },
        { series: `up{namespace="n",${JOB},pod="b",instance="10.0.0.2:9464"}`, values: "1x12" },
      ],
      alert_rule_test: [
        { eval_time: "5m", alertname: "ImageTaskSidecarTargetDown", exp_alerts: [] },
        {
          eval_time: "8m",
          alertname: "ImageTaskSidecarTargetDown",
          exp_alerts: [
            {
              exp_labels: {
                severity: "warning",
                namespace: "n",
                job: "image-task-sidecar",
                pod: "a",
                instance: "10.0.0.1:9464",
              },
            },
          ],
        },
        // There are targets: none is missing.
        { eval_time: "12m", alertname: "ImageTaskSidecarTargetMissing", exp_alerts: [] },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // Prometheus scrapes something else, and no replica of the service.
        { series: 'up{job="something-else",instance="10.0.0.9:80"}', values: "1x20" },
      ],
      alert_rule_test: [
        { eval_time: "5m", alertname: "ImageTaskSidecarTargetMissing", exp_alerts: [] },
        {
          eval_time: "15m",
          alertname: "ImageTaskSidecarTargetMissing",
          exp_alerts: [{ exp_labels: { severity: "critical", job: "image-task-sidecar" } }],
        },
      ],
    },
  ],
};
