"""A client generated from the daemon's own ``/openapi.json`` reads its real answers: pydantic
models made by datamodel-code-generator from the document a running daemon serves validate,
strictly and with no extra key allowed, what that daemon answers to every operation of the
document (on the fake model server); an answer that is not what the document says is
refused; and mypy --strict checks code written against the generated models, and refuses
code that misreads them."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import anyio
import pytest
from pydantic import BaseModel, ValidationError

from condensate.testing.fake_model import Call, FakeModelServer, Slow, Text, ToolCalls
from tests.integration.daemon import DaemonProcess

BIN = Path(sys.executable).parent
GENERATED = "condensate_generated_api"
"""The generated models' module name (a file of the test's temporary directory)."""


def generate(document: dict[str, Any], directory: Path) -> Path:
    """datamodel-code-generator's pydantic models for ``document``, in ``directory``."""
    source = directory / "openapi.json"
    source.write_text(json.dumps(document))
    output = directory / f"{GENERATED}.py"
    done = subprocess.run(
        [
            str(BIN / "datamodel-codegen"),
            "--input",
            str(source),
            "--input-file-type",
            "openapi",
            "--output",
            str(output),
            "--output-model-type",
            "pydantic_v2.BaseModel",
            "--target-python-version",
            "3.11",
            "--use-annotated",
            "--use-union-operator",
            "--use-standard-collections",
            "--field-constraints",
            "--strict-nullable",
            "--enum-field-as-literal",
            "all",
            "--extra-fields",
            "forbid",
            "--disable-timestamp",
            "--formatters",
            "builtin",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return output


@pytest.fixture(scope="module")
def generated(
    daemon: DaemonProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, Any], ModuleType, Path]]:
    """The daemon's document, the models generated from it (imported), and their file."""
    directory = tmp_path_factory.mktemp("generated")
    url = daemon.url + "/openapi.json"
    request = urllib.request.Request(url, headers=daemon.headers)  # noqa: S310 - loopback
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        document = json.loads(response.read())
    path = generate(document, directory)
    spec = importlib.util.spec_from_file_location(GENERATED, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[GENERATED] = module  # pydantic resolves the models' annotations through it
    try:
        spec.loader.exec_module(module)
        yield document, module, path
    finally:
        del sys.modules[GENERATED]


@dataclass
class Answer:
    operation: str
    status: int
    content_type: str
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class Exchange:
    """Calls the daemon and keeps every answer with the operation it answers."""

    session: aiohttp.ClientSession
    daemon: DaemonProcess
    answers: list[Answer] = field(default_factory=list)

    async def __call__(
        self, operation: str, method: str, path: str, body: Any = None, expect: int = 200
    ) -> Any:
        async with self.session.request(
            method, self.daemon.url + path, json=body, headers=self.daemon.headers
        ) as response:
            answer = Answer(
                operation, response.status, response.content_type, await response.text()
            )
        self.answers.append(answer)
        assert answer.status == expect, (operation, answer.status, answer.text[:2000])
        return answer.json() if answer.content_type == "application/json" else answer.text

    async def until(
        self, operation: str, path: str, done: Callable[[Any], bool], seconds: float = 30.0
    ) -> Any:
        """GET ``path`` until its answer is ``done``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            body = await self(operation, "GET", path)
            if done(body):
                return body
            await anyio.sleep(0.05)
        msg = f"{operation} {path} never got there in {seconds} s."
        raise AssertionError(msg)

    async def ended(self, thread: str, turns: int = 1) -> list[dict[str, Any]]:
        """Every event of ``thread`` (history included) once ``turns`` turns have ended."""

        def enough(page: dict[str, Any]) -> bool:
            return sum(bool(e["kind"] == "turn.ended") for e in page["events"]) >= turns

        page = await self.until(
            "tailThread", f"/threads/{thread}/tail?history=1&limit=1000", enough
        )
        return list(page["events"])


async def every_operation(
    session: aiohttp.ClientSession, daemon: DaemonProcess, fake: FakeModelServer, work: Path
) -> list[Answer]:
    """Real answers to every operation of the API: threads that read a file, take messages,
    wait on an approval, get interrupted, pinned, compacted and archived; and some errors."""
    call = Exchange(session, daemon)
    (work / "note.txt").write_text("a short note\n")
    model = "claude-typed-1"
    fake.queue(
        ToolCalls([Call("read", {"path": "note.txt"})]),
        Text("I read the note."),
        Text("noted"),
        Slow(Text("a very slow answer"), chunk_delay=0.5, chunks=40),
        model=model,
    )
    await call("getHealth", "GET", "/health")
    await call("getReady", "GET", "/ready")
    await call("getOpenApi", "GET", "/openapi.json")
    await call("getMetrics", "GET", "/metrics")
    body = {"model": f"anthropic:{model}", "cwd": str(work), "brief": "Read note.txt."}
    thread = (await call("createThread", "POST", "/threads", body, expect=201))["id"]
    await call.ended(thread)
    await call("sendMessage", "POST", f"/threads/{thread}/messages", {"text": "Thanks."}, 202)
    events = await call.ended(thread, turns=2)
    await call("listThreads", "GET", "/threads")
    await call("getThread", "GET", f"/threads/{thread}")
    await call("getThread", "GET", "/threads/t-nobody", expect=404)
    await call("getCompaction", "GET", f"/threads/{thread}/compact")
    answer = next(e for e in events if e["kind"] == "message.assistant" and not e["tool_calls"])
    await call("pinMessage", "POST", f"/threads/{thread}/pins", {"seq": answer["seq"]})
    await call("callContextTool", "POST", f"/threads/{thread}/tools/context_usage", {})
    await call("callContextTool", "POST", f"/threads/{thread}/tools/nothing", {}, expect=404)
    await call("interruptThread", "POST", f"/threads/{thread}/interrupt", {}, expect=409)
    await call("sendMessage", "POST", f"/threads/{thread}/messages", {"text": "Slowly."}, 202)
    await call.until("getThread", f"/threads/{thread}", lambda t: t["status"] == "running")
    await call("interruptThread", "POST", f"/threads/{thread}/interrupt", {})
    await call.ended(thread, turns=3)
    answered = {"mode": "decline"}
    await call("answerCompaction", "POST", f"/threads/{thread}/compact", answered, expect=409)
    queued = {"mode": "microcompact"}
    await call("answerCompaction", "POST", f"/threads/{thread}/compact", queued, expect=202)
    await call("getCompaction", "GET", f"/threads/{thread}/compact")
    await call("tailThread", "GET", f"/threads/{thread}/tail?history=1&limit=1000")
    await call("tailThread", "GET", f"/threads/{thread}/tail?after=1&limit=2")

    asking = "claude-typed-2"
    fake.queue(ToolCalls([Call("shell", {"command": "true"})]), Text("done"), model=asking)
    body = {**body, "model": f"anthropic:{asking}", "permissions": "ask"}
    other = (await call("createThread", "POST", "/threads", body, expect=201))["id"]
    waiting = await call.until(
        "listApprovals", f"/threads/{other}/approvals", lambda a: bool(a["approvals"])
    )
    (approval,) = waiting["approvals"]
    decided = {"id": approval["id"], "decision": "allow"}
    await call("answerApproval", "POST", f"/threads/{other}/approvals", decided)
    await call.ended(other)
    await call("archiveThread", "POST", f"/threads/{other}/archive")
    await call("archiveThread", "POST", f"/threads/{other}/archive", expect=409)

    attach = {"engine": "claude", "cwd": str(work), "args": ["--model", "sonnet"]}
    attached = (await call("attachSession", "POST", "/attach", attach, expect=201))["thread"]
    await call("detachSession", "POST", f"/threads/{attached['id']}/detach", {"exitCode": 0})
    await call("detachSession", "POST", f"/threads/{thread}/detach", {"exitCode": 0}, 409)
    return call.answers


@pytest.fixture(scope="module")
def answers(
    daemon: DaemonProcess, fake: FakeModelServer, tmp_path_factory: pytest.TempPathFactory
) -> list[Answer]:
    """Every operation's real answers, once for the module."""

    async def run() -> list[Answer]:
        async with aiohttp.ClientSession() as session:
            return await every_operation(
                session, daemon, fake, tmp_path_factory.mktemp("typed-work")
            )

    return anyio.run(run)


def model_for(
    document: dict[str, Any], module: ModuleType, operation: str, status: int
) -> type[BaseModel] | None:
    """The generated model the document names for ``operation``'s ``status`` answer (None:
    not JSON)."""
    for item in document["paths"].values():
        for described in item.values():
            if described["operationId"] == operation:
                content = described["responses"][str(status)]["content"]
                if "application/json" not in content:
                    return None
                name = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                model: type[BaseModel] = getattr(module, name)
                return model
    msg = f"The document has no operation {operation}."
    raise AssertionError(msg)


def test_every_real_answer_validates_strictly_against_the_generated_models(
    generated: tuple[dict[str, Any], ModuleType, Path], answers: list[Answer]
) -> None:
    """Each answer of every operation (and its errors) is its generated model, strictly: no
    key the document lacks, no value of another type; every operation was answered."""
    document, module, _ = generated
    # The live channel's streams are not JSON answers (test_live reads them as events).
    operations = {
        described["operationId"]
        for item in document["paths"].values()
        for described in item.values()
        if "text/event-stream" not in described["responses"].get("200", {}).get("content", {})
    }
    assert operations >= {"getThread", "tailThread", "getCompaction"}
    assert {a.operation for a in answers if a.status < 300} == operations
    kinds: set[str] = set()
    for answer in answers:
        model = model_for(document, module, answer.operation, answer.status)
        if model is None:
            assert answer.content_type == "text/plain", answer
            continue
        assert answer.content_type == "application/json", answer
        model.model_validate_json(answer.text, strict=True)
        if answer.operation == "tailThread":
            kinds |= {e["kind"] for e in answer.json()["events"]}
    # The tail answers carried every kind of event the threads logged, each its own shape.
    assert {"thread.created", "message.user", "message.assistant", "tool.result"} <= kinds
    assert {"model.usage", "turn.started", "turn.ended", "compaction.requested"} <= kinds
    assert {"approval.requested", "approval.answered", "message.pinned"} <= kinds


def last(answers: list[Answer], operation: str, status: int) -> dict[str, Any]:
    """The last answer of ``operation`` with ``status``."""
    (*_, body) = (a.json() for a in answers if (a.operation, a.status) == (operation, status))
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize(
    ("operation", "status", "spoil", "why"),
    [
        ("getThread", 200, lambda t: t.update(surprise=1), "a key the document lacks"),
        ("getThread", 200, lambda t: t["usage"].update(used="12"), "a number as a string"),
        ("getThread", 200, lambda t: t.pop("costs"), "a key missing"),
        ("getThread", 200, lambda t: t.update(status="sleeping"), "a status of neither shape"),
        ("getThread", 404, lambda e: e.update(code="x"), "an error with another key"),
        ("tailThread", 200, lambda p: p["events"][0].update(kind="dream"), "an unknown kind"),
        ("tailThread", 200, lambda p: p["events"][0].pop("seq"), "an event without its seq"),
        ("getCompaction", 200, lambda c: c["preview"]["summary"].pop("cost"), "a cost missing"),
        ("listApprovals", 200, lambda a: a["approvals"][0].update(deadline=1), "a time as number"),
    ],
)
def test_an_answer_that_is_not_what_the_document_says_is_refused(
    generated: tuple[dict[str, Any], ModuleType, Path],
    answers: list[Answer],
    operation: str,
    status: int,
    spoil: Callable[[dict[str, Any]], object],
    why: str,
) -> None:
    """The generated models are a real check: a real answer spoiled is refused."""
    document, module, _ = generated
    model = model_for(document, module, operation, status)
    assert model is not None
    real = last(answers, operation, status)
    model.model_validate_json(json.dumps(real), strict=True)
    spoiled = copy.deepcopy(real)
    spoil(spoiled)
    with pytest.raises(ValidationError):
        model.model_validate_json(json.dumps(spoiled), strict=True)


USAGE = f'''"""Code written against the generated client."""

from {GENERATED} import Compaction, LoggedUserMessage, TailPage, Thread, ThreadOrElsewhere


def fullness(thread: Thread) -> float:
    return thread.usage.used / thread.usage.line + thread.costs.tokens.cacheRead


def texts(page: TailPage) -> list[str]:
    return [e.root.text for e in page.events if isinstance(e.root, LoggedUserMessage)]


def curator_usd(compaction: Compaction) -> float | None:
    cost = compaction.preview.summary.cost
    return None if cost is None else cost.curator.usd


def owner(shown: ThreadOrElsewhere) -> str | None:
    return shown.root.owner
'''

MISREAD = f'''"""Code that misreads the generated client."""

from {GENERATED} import TailPage, Thread


def used(thread: Thread) -> str:
    return thread.usage.used


def first_text(page: TailPage) -> str:
    return page.events[0].root.text
'''

MYPY_CONFIG = f"""[mypy]
strict = True
plugins = pydantic.mypy

# datamodel-code-generator gives the root model of an optional integer with bounds (a body's
# keepFrom, outputCap, budget) a None default its type does not admit: the generator's slip,
# not the document's. Every other error in the generated module still counts.
[mypy-{GENERATED}]
disable_error_code = assignment
"""


def test_code_written_against_the_generated_models_type_checks(
    generated: tuple[dict[str, Any], ModuleType, Path], tmp_path: Path
) -> None:
    """mypy --strict passes code that reads the generated models right, and refuses code
    that reads a number as a string or a text every event does not have."""
    _, _, path = generated
    (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "usage.py").write_text(USAGE)
    (tmp_path / "misread.py").write_text(MISREAD)
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "usage.py", "misread.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors, done.stdout + done.stderr
    assert all(line.startswith("misread.py:") for line in errors), done.stdout
    assert any('got "int", expected "str"' in line for line in errors), done.stdout
    assert any('has no attribute "text"' in line for line in errors), done.stdout
    assert len(errors) >= 2, done.stdout
