"""Long tool output kept to a cap: the head and the tail, with a count of what was cut.

Shared by the native tools: shell feeds a command's output through ``HeadTail`` as it
arrives, search caps its list of matches with ``capped``.
"""

from __future__ import annotations


class HeadTail:
    """Keeps the first and last halves of ``cap`` characters of a stream, counting the rest,
    so a command printing gigabytes costs ``cap`` characters of memory."""

    def __init__(self, cap: int) -> None:
        self._head_room = cap // 2
        self._tail_room = cap - self._head_room
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self._total = 0

    def feed(self, text: str) -> None:
        self._total += len(text)
        if self._head_len < self._head_room:
            take = text[: self._head_room - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take) :]
        if text:
            self._tail = (self._tail + text)[-self._tail_room :] if self._tail_room else ""

    def text(self) -> str:
        head = "".join(self._head)
        cut = self._total - len(head) - len(self._tail)
        if cut <= 0:
            return head + self._tail
        return f"{head}\n[… {cut:,} of {self._total:,} characters cut …]\n{self._tail}"


def capped(text: str, cap: int) -> str:
    kept = HeadTail(cap)
    kept.feed(text)
    return kept.text()
