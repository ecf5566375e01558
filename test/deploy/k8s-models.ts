import { HTTPRoute } from "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import {
  PrometheusRule,
  ServiceMonitor,
} from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Ingress, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import {
  ConfigMap,
  PersistentVolumeClaim,
  Secret,
  Service,
  ServiceAccount,
} from "kubernetes-models/v1";
import type { K8sObject } from "./kustomize.js";

/*
 * The schema of every kind the tree renders: Kubernetes' own OpenAPI schemas
 * (kubernetes-models) and the CRDs' (KEDA, Gateway API, Prometheus operator),
 * compiled to validators.
 */

type Model = new (data: never) => { validate(): void };

const MODELS: Record<string, Model> = {
  "v1/ServiceAccount": ServiceAccount,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "apps/v1/Deployment": Deployment,
  "apps/v1/StatefulSet": StatefulSet,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "networking.k8s.io/v1/Ingress": Ingress,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "gateway.networking.k8s.io/v1/HTTPRoute": HTTPRoute,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
};

/**
 * Why an object does not pass its kind's schema, or undefined when it does.
 * A kind without a schema here is refused too, so nothing goes unchecked.
 */
export function schemaProblem(object: K8sObject): string | undefined {
  const Model = MODELS[`${object.apiVersion}/${object.kind}`];
  const name = `${object.apiVersion} ${object.kind} ${object.metadata?.name}`;
  if (!Model) return `${name}: no schema for this kind`;
  try {
    new Model(object as never).validate();
    return undefined;
  } catch (err) {
    return `${name}: ${(err as Error).message}`;
  }
}
