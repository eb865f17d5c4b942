"""tokenrelay: authenticated HTTP calls and SSE subscriptions through a tokenrelay process.

    from tokenrelay import Relay
    with Relay(config="config.yaml", env="staging") as relay:
        print(relay.request("GET", "/items").json())
"""

from ._async import AsyncRelay, AsyncSessionWatch, AsyncSubscription
from ._core import AuthPrompt, Event, Response, SessionChange, SubscriptionState, find_binary
from ._sync import Call, Relay, Subscription
from .errors import (
    AuthError,
    Cancelled,
    ConfigError,
    InteractionRequired,
    InvalidParams,
    LimitExceeded,
    LoggedOut,
    MethodNotFound,
    NotSupported,
    ProtocolError,
    RelayClosed,
    RelayError,
    RelayTimeout,
    ShuttingDown,
    StoreError,
    TransportError,
    UnknownEnvironment,
    UnknownProfile,
    error_from_json,
)

__version__ = "0.1.0"

__all__ = [
    "Relay", "AsyncRelay", "Call", "Subscription", "AsyncSubscription", "Response", "Event", "SubscriptionState",
    "AuthPrompt", "SessionChange", "AsyncSessionWatch",
    "find_binary", "error_from_json", "RelayError", "ConfigError", "UnknownEnvironment", "UnknownProfile",
    "AuthError", "InteractionRequired", "TransportError", "RelayTimeout", "Cancelled", "LimitExceeded",
    "ShuttingDown", "NotSupported", "LoggedOut", "InvalidParams", "ProtocolError", "MethodNotFound", "RelayClosed",
    "StoreError",
]
