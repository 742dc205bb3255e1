"""The projector: an incremental fold from a thread's events to its view and planning state.

``view`` holds the fold (``Projection``), ``entries`` what a view is made of, ``billing`` a
thread's bill and ``snapshot`` the codec that lets a snapshot plus what followed equal a full
replay. Pure: no I/O, no awaits.
"""

from condensate.core.projector.billing import Bill
from condensate.core.projector.entries import (
    CANNOT_HELP_CODE,
    DROP_NOTICE,
    PAUSE_CODE,
    SLIDE_NOTICE,
    Anchor,
    Entry,
    Requested,
    Role,
    WindowRecord,
    drop_notice,
)
from condensate.core.projector.view import Projection, pinnable, project

__all__ = [
    "CANNOT_HELP_CODE",
    "DROP_NOTICE",
    "PAUSE_CODE",
    "SLIDE_NOTICE",
    "Anchor",
    "Bill",
    "Entry",
    "Projection",
    "Requested",
    "Role",
    "WindowRecord",
    "drop_notice",
    "pinnable",
    "project",
]
