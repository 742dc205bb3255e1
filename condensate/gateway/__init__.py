"""The model gateway: Condensate in the CLI engines' request path.

Each CLI session reaches its provider through the daemon's loopback port with a pass that
names its thread and session (``passes``); the gateway measures each request, forwards it
with the real credential, streams the reply back event for event and logs the provider's
count as the call's ``model.usage`` (``wire`` holds the pure parsing, ``proxy`` the edge).
"""

from condensate.gateway.passes import Pass, Passes, PassRefused
from condensate.gateway.proxy import Gateway, GatewayRecorder, Upstream

__all__ = ["Gateway", "GatewayRecorder", "Pass", "PassRefused", "Passes", "Upstream"]
