"""Background responses through the official `openai` Python SDK, unchanged.

Run by test/responses/background-python-sdk.test.ts against the service it
started (OPENAI_BASE_URL, OPENAI_API_KEY). Prints one JSON object: what the
SDK returned, for the test to compare with what OpenAI's API answers.
"""

import json
import sys
import time

import openai
from openai import OpenAI

client = OpenAI(max_retries=0, timeout=30)


def until(response_id, statuses):
    response = client.responses.retrieve(response_id)
    deadline = time.monotonic() + 20
    while response.status not in statuses and time.monotonic() < deadline:
        time.sleep(0.05)
        response = client.responses.retrieve(response_id)
    return response


def complete():
    created = client.responses.create(
        model="gpt-4o-mini", input="Say hello", instructions="Be brief.", background=True
    )
    done = until(created.id, ("completed", "failed", "cancelled"))
    # The logged events again, from after event 2: what a client whose stream broke off reads.
    resumed = client.responses.retrieve(created.id, stream=True, starting_after=2)
    events = [(event.type, event.sequence_number) for event in resumed]
    deleted = client.responses.delete(created.id)
    try:
        client.responses.retrieve(created.id)
        after_delete = "found"
    except openai.NotFoundError as err:
        after_delete = err.status_code
    return {
        "created": {"status": created.status, "background": created.background, "id": created.id},
        "done": {
            "status": done.status,
            "id": done.id,
            "output_text": done.output_text,
            "usage": done.usage.model_dump() if done.usage else None,
        },
        "events": events,
        "deleted": deleted,
        "after_delete": after_delete,
    }


def cancel():
    created = client.responses.create(model="gpt-4o-mini", input="Take your time", background=True)
    until(created.id, ("in_progress",))
    cancelled = client.responses.cancel(created.id)
    return {"cancelled": {"status": cancelled.status, "id": cancelled.id, "created": created.id}}


print(json.dumps({"complete": complete, "cancel": cancel}[sys.argv[1]](), default=str))
