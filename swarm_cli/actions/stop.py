from .base import ActionSpec, Bucket, Limits

STOP = ActionSpec(
    name="stop",
    api="StopInstances",
    method="stop_instances",
    verb="stopped",
    limits=Limits(calls=Bucket(50, 5), instances=Bucket(1000, 20)),
    result_key="StoppingInstances",
    target_state="stopped",
    undo="start",
    flags={"force": "Force", "hibernate": "Hibernate"},
)
