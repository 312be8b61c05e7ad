"""The prose of a Python source file: its docstrings and comments, in file order, as paragraphs.

A docstring is any string literal that forms a whole expression statement (module, class, function and attribute
docstrings); it is evaluated (escapes, prefixes) and dedented with inspect.cleandoc. Runs of comment lines on
consecutive lines form one paragraph, with the '#' and one following space removed. Tool directives (noqa, type:,
pragma, …), shebangs and coding lines are dropped. A file that stops tokenising keeps what came before the error.
"""
from __future__ import annotations

import ast
import inspect
import io
import tokenize

DIRECTIVES = ("noqa", "type:", "pragma", "fmt:", "pylint:", "isort:", "mypy:", "pyright:", "ruff:", "-*-", "!",
              "flake8:", "nosec", "NOQA")
STATEMENT_START = {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.ENCODING}


def docstring_text(literal: str) -> str | None:
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None  # f-strings and the like
    return inspect.cleandoc(value) if isinstance(value, str) else None


def comment_text(comment: str) -> str | None:
    text = comment[1:]
    text = text[1:] if text.startswith(" ") else text
    stripped = text.strip()
    if not stripped or stripped.startswith(DIRECTIVES):
        return None
    return text.rstrip()


def prose_paragraphs(source: bytes) -> list[str]:
    """The docstrings and comment paragraphs of one file's source bytes."""
    paragraphs: list[str] = []
    comments: list[str] = []
    last_comment_line = -2
    prev_type = tokenize.ENCODING

    def flush() -> None:
        if comments:
            paragraphs.append("\n".join(comments))
            comments.clear()

    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type == tokenize.COMMENT:
                text = comment_text(tok.string)
                if text is not None:
                    if tok.start[0] != last_comment_line + 1:
                        flush()
                    comments.append(text)
                    last_comment_line = tok.start[0]
                continue
            if tok.type == tokenize.NL:
                continue
            if tok.type == tokenize.STRING and prev_type in STATEMENT_START:
                flush()
                text = docstring_text(tok.string)
                if text:
                    paragraphs.append(text)
            prev_type = tok.type
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, IndentationError):
        pass
    flush()
    return paragraphs
