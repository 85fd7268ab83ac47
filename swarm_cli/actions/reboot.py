from .base import ActionSpec, Bucket, Limits

REBOOT = ActionSpec(
    name="reboot",
    api="RebootInstances",
    method="reboot_instances",
    verb="rebooted",
    limits=Limits(calls=Bucket(50, 5)),
    target_state="running",
)
