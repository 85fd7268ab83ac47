"""Whether this install carries the sandbox extra (moto and its server)."""

from __future__ import annotations

SANDBOX_EXTRA = (
    "pip install '.[sandbox]' in a checkout of swarm (or 'swarm-cli[sandbox] @ git+URL@TAG',"
    " or 'WHEEL[sandbox]' with the wheel's file name)"
)


def missing_extra() -> str | None:
    """What to install for the fake EC2 (a test server production installs need not carry)."""
    import importlib.util

    absent = [
        name
        for name in ("moto", "flask", "flask_cors", "werkzeug")
        if importlib.util.find_spec(name) is None
    ]
    if not absent:
        return None
    return f"the fake EC2 needs {', '.join(absent)}, which this install lacks: {SANDBOX_EXTRA}"
