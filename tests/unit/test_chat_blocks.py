"""How ``chat`` cuts a reply being written into finished Markdown blocks (printed) and the
rest (still being written)."""

from __future__ import annotations

from condensate.cli.chat_tty import split_blocks


def test_a_blank_line_ends_a_block():
    """Everything up to the last blank line is finished; the paragraph after it is not."""
    assert split_blocks("One.\n\nTwo is still") == ("One.\n\n", "Two is still")


def test_a_blank_line_inside_a_code_fence_does_not_end_a_block():
    """An open fence keeps its blank lines: the code block is printed whole, once closed."""
    text = "Intro.\n\n```py\na = 1\n\nb = 2\n"
    assert split_blocks(text) == ("Intro.\n\n", "```py\na = 1\n\nb = 2\n")
    closed = text + "```\n\nAfter"
    assert split_blocks(closed) == (closed[: -len("After")], "After")
