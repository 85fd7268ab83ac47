from .base import ActionSpec, Bucket, Limits

START = ActionSpec(
    name="start",
    api="StartInstances",
    method="start_instances",
    verb="started",
    limits=Limits(calls=Bucket(5, 2), instances=Bucket(1000, 2)),
    result_key="StartingInstances",
    target_state="running",
    undo="stop",
)
