"""The HTTP API's shapes and its OpenAPI document. Pure: the server validates requests and
builds answers through these models, the document is made from them, and the client
(``condensate.client``) reads answers back into them.

``bodies``: what a request sends. ``answer``: the base of every answer, ``Error`` and
``Health``. ``threads``, ``log``, ``compaction``, ``approvals``: what the daemon answers.
``document``: the OpenAPI 3.1 document.
"""

from condensate.api.answer import Answer, Error, Health, Moment
from condensate.api.approvals import Approval, ApprovalAnswered, Approvals
from condensate.api.bodies import (
    INT64_MAX,
    ApprovalAnswer,
    CompactAnswer,
    CreateThread,
    Interrupt,
    PinMessage,
    ResetBody,
    SendMessage,
)
from condensate.api.compaction import (
    CollapsePreview,
    CompactAnswered,
    Compaction,
    CompactionUsage,
    CuratorCall,
    MicrocompactPreview,
    Preview,
    Requested,
    SummaryCost,
    SummaryPreview,
    ThinkingDropped,
    TierCost,
)
from condensate.api.document import (
    GUARDED,
    OPERATIONS,
    WITH_BODY,
    OpenAPIDocument,
    Operation,
    Reply,
    ThreadOrElsewhere,
    openapi_document,
)
from condensate.api.log import LOGGED, LoggedEvent, TailPage, logged
from condensate.api.threads import (
    AnyThread,
    Archived,
    Costs,
    Interrupted,
    MessageSent,
    Pinned,
    ResetState,
    SessionCosts,
    Thread,
    ThreadElsewhere,
    ThreadList,
    Tokens,
    ToolAnswer,
    Usage,
)

__all__ = [
    "GUARDED",
    "INT64_MAX",
    "LOGGED",
    "OPERATIONS",
    "WITH_BODY",
    "Answer",
    "AnyThread",
    "Approval",
    "ApprovalAnswer",
    "ApprovalAnswered",
    "Approvals",
    "Archived",
    "CollapsePreview",
    "CompactAnswer",
    "CompactAnswered",
    "Compaction",
    "CompactionUsage",
    "Costs",
    "CreateThread",
    "CuratorCall",
    "Error",
    "Health",
    "Interrupt",
    "Interrupted",
    "LoggedEvent",
    "MessageSent",
    "MicrocompactPreview",
    "Moment",
    "OpenAPIDocument",
    "Operation",
    "PinMessage",
    "Pinned",
    "Preview",
    "Reply",
    "Requested",
    "ResetBody",
    "ResetState",
    "SendMessage",
    "SessionCosts",
    "SummaryCost",
    "SummaryPreview",
    "TailPage",
    "ThinkingDropped",
    "Thread",
    "ThreadElsewhere",
    "ThreadList",
    "ThreadOrElsewhere",
    "TierCost",
    "Tokens",
    "ToolAnswer",
    "Usage",
    "logged",
    "openapi_document",
]
