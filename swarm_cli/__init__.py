"""swarm: bulk cloud mutations as fast as the API allows, without losing an intent."""

__version__ = "0.6.7"
