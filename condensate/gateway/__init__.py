"""The model gateway: Condensate in the CLI engines' request path.

Each CLI session reaches its provider through the daemon's loopback port with a pass that
names its thread and session (``passes``); the gateway measures each request, forwards it
with the real credential, streams the reply back event for event and logs the provider's
count as the call's ``model.usage``. ``dialects`` holds what differs by API (Anthropic
Messages, OpenAI Responses) behind one small protocol; ``wire`` what does not (the meter,
reply counts, SSE); ``binding`` the thinking a changed request may still carry; ``proxy`` is
the edge. What the runtime answers for a held request is ``runtime.gateway_port``'s.
"""

from condensate.gateway.passes import Pass, Passes, PassRefused
from condensate.gateway.proxy import Gateway, GatewayRecorder, Upstream

__all__ = ["Gateway", "GatewayRecorder", "Pass", "PassRefused", "Passes", "Upstream"]
