from .base import ActionSpec, Bucket, Limits

TERMINATE = ActionSpec(
    name="terminate",
    api="TerminateInstances",
    method="terminate_instances",
    verb="terminated",
    limits=Limits(calls=Bucket(100, 5), instances=Bucket(1000, 20)),
    result_key="TerminatingInstances",
    target_state="terminated",
)
