"""The relay, sans IO: an engine's switch routing calls to cartridge hosts over Unix sockets.

RELAY_NOTIFY (10) carries a host's inventory and limits toward the switch; RELAY_STATE (11)
carries the switch's opaque resources payload toward a host. :class:`SwitchCore` decides
the switch's side (attach, POLICY first, the identity probe, routing by cap and by routing
id, admission per pool, a lost host's calls); :class:`HostLink` decides the host's side of
one link, and its forwarding table (:func:`switch_dispatch`) the frames it relays unchanged
but for their ids (RLY-18). The shells that move the bytes are ``cartridge_runtime.host`` (a host) and the
engine's :meth:`~cartridge_runtime.engine.Engine.add_host` (a switch). Nothing here does IO.
"""

from __future__ import annotations

from ._errors import HostAttachError, RelayProtocolError
from ._forward import (
    ToCartridge,
    ToSwitch,
    app_router,
    forwarding_compiled,
    switch_dispatch,
    switch_forwarder,
)
from ._host_link import (
    Absorbed,
    ForPeerCall,
    ForRequest,
    HostLink,
    HostLinkEvent,
    OpenRequest,
    PolicyChanged,
    Refuse,
    StateKept,
    Unrouted,
)
from ._inventory import (
    CartridgeRecord,
    Inventory,
    encode_inventory,
    parse_inventory,
    pool_chain,
    read_relay_notify,
    relay_notify,
    relay_state,
)
from ._probe import PROBE_TIMEOUT
from ._switch import SwitchCore
from ._switch_model import (
    HOST_TRANSITIONS,
    HostChanged,
    HostInput,
    HostState,
    HostView,
    SwitchAction,
    ToApp,
    ToHost,
)

__all__ = (
    "HostAttachError",
    "RelayProtocolError",
    # the switch
    "SwitchCore",
    "SwitchAction",
    "ToHost",
    "ToApp",
    "HostChanged",
    "HostState",
    "HostInput",
    "HostView",
    "HOST_TRANSITIONS",
    "PROBE_TIMEOUT",
    # the host's side of a link
    "HostLink",
    "HostLinkEvent",
    "PolicyChanged",
    "StateKept",
    "Absorbed",
    "OpenRequest",
    "ForRequest",
    "ForPeerCall",
    "Refuse",
    "Unrouted",
    # the host's forwarding table (RLY-18)
    "ToCartridge",
    "ToSwitch",
    "forwarding_compiled",
    "switch_dispatch",
    "switch_forwarder",
    "app_router",
    # inventory
    "CartridgeRecord",
    "Inventory",
    "encode_inventory",
    "parse_inventory",
    "pool_chain",
    "read_relay_notify",
    "relay_notify",
    "relay_state",
)
