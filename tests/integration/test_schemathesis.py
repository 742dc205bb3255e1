"""schemathesis against a real daemon's ``/openapi.json``: every operation gets at most 25
generated requests (seeded, so a run is repeatable), positive and negative, through its
examples, coverage, fuzzing and stateful phases, with the token header (tail's ``wait``
held at 0 to keep the run short, and the live streams' ``seconds`` at 0 so that they end).
No answer may be a 5xx, and every answer must match what the document says: its status,
content type, headers, body schema (each event of a stream too), and the Allow header of a
405.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from condensate.http.server import ROUTES
from tests.integration.daemon import DaemonProcess

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "allow_header_conformance",
    ]
)
MAX_EXAMPLES = 25
SEED = 11
CONFIG = """
# A tail's long-poll holds a request up to 30 s; test_api covers it, and here it would only
# spend the time budget.
[parameters]
"query.wait" = 0
# A live stream runs until its client goes; with seconds=0 it sends its backlog (a thread's
# log, every thread's snapshot) and ends, which is what a conformance check can read.
# test_live covers the streams as they run.
"query.seconds" = 0

# A thread needs a cwd that is a directory on the daemon's machine (else 422 no-such-cwd), which
# generated text never is, so no run makes a thread and the operations on one answer 404
# (schemathesis's body overrides sent no body at all, schemathesis 4.32.5); test_api checks
# their other answers against the same document.
[[operations]]
include-path = "/threads/{thread_id}"
include-method = "GET"
warnings = false

[[operations]]
include-path = "/threads/{thread_id}/compact"
include-method = "GET"
warnings = false

[[operations]]
include-path = "/threads/{thread_id}/live"
include-method = "GET"
warnings = false

[[operations]]
include-path = "/threads/{thread_id}/tail"
include-method = "GET"
warnings = false

# No thread in a fuzz run waits on an approval, so every answer is 404 unknown-approval
# (schemathesis warns of missing test data); test_approvals_api covers its other answers.
[[operations]]
include-path = "/threads/{thread_id}/approvals"
include-method = "POST"
warnings = false
"""


def test_the_api_conforms_to_its_openapi_document(daemon: DaemonProcess, tmp_path: Path) -> None:
    """schemathesis finds no 5xx and no answer that breaks the OpenAPI document."""
    st = Path(sys.executable).parent / "st"
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    result = subprocess.run(
        [
            str(st),
            "--config-file",
            str(config),
            "run",
            daemon.url + "/openapi.json",
            "--header",
            f"Authorization: Bearer {daemon.token}",
            "--checks",
            CHECKS,
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            "--workers",
            "1",
            "--request-timeout",
            "40",
            "--report-dir",
            str(tmp_path),
        ],
        cwd=tmp_path,  # its cache of past failures stays out of the repository
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    # Every route (schemathesis may leave /openapi.json itself out).
    tested = re.search(r"Tested: (\d+)", result.stdout)
    assert tested is not None, result.stdout[-4000:]
    assert int(tested[1]) >= len(ROUTES) - 1, result.stdout[-4000:]
    assert "No issues found" in result.stdout, result.stdout[-4000:]
