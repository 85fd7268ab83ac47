"""The rate controller: small parts, each pure with time passed in, composed in one place.

``estimator`` says what gets through, ``prober`` when to ask for more, ``noise`` whether
throttles answer to the pace at all, ``pacing`` when the next call may leave and how many
may be in flight; ``controller`` composes them behind the engine's interface.
"""

from .controller import Controller, ControllerProfile

__all__ = ["Controller", "ControllerProfile"]
