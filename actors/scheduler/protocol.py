"""The background-task protocol (spec section 10), as plain functions.

A long task fails in two ways: it never stops researching, or it stops early with a confident
progress note. So each session's brief asks for a last line `STATUS: done` or `STATUS: continue`;
a report without one goes to a judge call (finished deliverable or progress note); an unfinished
task is rescheduled a minute later with the report appended to its notes (the owner is not
told); from the third session the brief says to stop researching and deliver; after the sixth
it fails with its notes kept. A report that claims a saved document is refused unless a tool
in that session produced a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from actors.common.jsonish import find_object
from actors.scheduler.tasks import Status, Task, parse_repeat
from actors.session.claims import claim_sentence, split_sentences

MAX_SESSIONS = 6
# From this session on the brief says: stop researching, produce the deliverable.
DELIVER_FROM_SESSION = 3
RETRY_SECONDS = 60.0
# Notes carried between sessions are capped: the tail (the latest progress) is what is kept.
NOTES_CHARS = 6000
REPORT_NOTE_CHARS = 1500

Verdict = Literal["done", "continue"]

_STATUS_LINE = re.compile(r"^[\s>*_`#-]*status\s*[:=-]\s*[*_`]*\s*(done|continue)\b[\s.*_`!]*$", re.IGNORECASE)
# Words that make a claim a claim about a file the task produced.
_DOCUMENT_WORDS = re.compile(
    r"\b(?:file|document|doc|docx|pdf|report|spreadsheet|sheet|xlsx|csv|slides?|deck|pptx|chart|"
    r"attachment|download)\b|\.(?:pdf|docx?|xlsx?|pptx?|csv|md|txt|png)\b", re.IGNORECASE)

REFUSED_NOTE = ("The previous session said a file or document was saved, but no document tool made one, "
                "so nothing was saved. Save the deliverable with a document tool (make_pdf, make_word, ...) "
                "and report only what the tool returned.")


# -- the brief --------------------------------------------------------------------------------

def brief(task: Task, session: int) -> str:
    """The message a task's session runs: its goal, the notes so far, and the rules."""
    lines = [f"Background task: {task.title}", "", f"Goal: {task.goal}", ""]
    if task.notes.strip():
        lines += ["Notes from your earlier sessions on this task (in progress):", task.notes.strip(), ""]
    lines.append(f"This is session {session} of at most {MAX_SESSIONS}. Nobody is watching this run: "
                 "work with your tools, then write your report for the owner.")
    if session >= DELIVER_FROM_SESSION:
        lines.append("Stop researching now and produce the deliverable from what you already have; "
                     "say plainly what is still unknown.")
    lines.append("If the deliverable is a document, save it with a document tool. Never say a file exists "
                 "or was saved unless a tool result in this session shows it.")
    lines.append("End your reply with one last line: `STATUS: done` if the deliverable is finished, or "
                 "`STATUS: continue` if another session is needed (then say what is left).")
    return "\n".join(lines)


# -- reading a report ---------------------------------------------------------------------------

def read_status(report: str) -> Verdict | None:
    """The verdict on the report's last non-empty line, or None if it has none."""
    for line in reversed(report.strip().splitlines()):
        if line.strip():
            match = _STATUS_LINE.match(line.strip())
            return match.group(1).lower() if match else None  # type: ignore[return-value]
    return None


def strip_status(report: str) -> str:
    """The report without its STATUS line (and the file markers' surrounding blank lines kept)."""
    lines = report.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip():
            if _STATUS_LINE.match(lines[i].strip()):
                del lines[i]
            break
    return "\n".join(lines).strip()


def first_sentence(report: str) -> str:
    """The report's first sentence, as the notification shows it."""
    for sentence in split_sentences(strip_status(report)):
        text = sentence.strip().lstrip("#>*-_ ").strip()
        if text and not text.startswith("[file:"):
            return text[:280]
    return ""


def judge_messages(task: Task, report: str) -> list[dict[str, str]]:
    """The judge call for a report without a STATUS line."""
    return [
        {"role": "system", "content": (
            "You judge a background task's report. Answer with JSON only: "
            '{"verdict": "deliverable"} if the report is the finished deliverable the goal asks for, or '
            '{"verdict": "progress"} if it is a progress note, a plan or a partial answer.')},
        {"role": "user", "content": f"Goal: {task.goal}\n\nReport:\n{report[:6000]}"},
    ]


def parse_judgement(answer: str | None) -> Verdict | None:
    """The judge's verdict (lenient JSON, or the bare word), None if it said neither."""
    if not answer:
        return None
    found = find_object(answer, {"verdict"})
    word = str(found.get("verdict", "")) if found else answer
    word = word.strip().lower()
    if "deliverable" in word or word in ("done", "finished"):
        return "done"
    if "progress" in word or word in ("continue", "unfinished"):
        return "continue"
    return None


def made_a_file(tools: list[dict[str, Any]]) -> bool:
    """Whether a tool in the session ended well and produced a file (the document tool's result)."""
    return any(t.get("status") == "done" and t.get("files") for t in tools)


def unbacked_file_claim(report: str, tools: list[dict[str, Any]]) -> bool:
    """The report claims a saved file or document, and no tool in the session made one."""
    if made_a_file(tools):
        return False
    return any(claim_sentence(s) and _DOCUMENT_WORDS.search(s) for s in split_sentences(strip_status(report)))


# -- what happens next ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """A session's effect on its row, and what follows from it."""

    status: Status
    next_run: float | None = None
    result: str | None = None
    notes: str = ""
    runs: int | None = None
    error: str | None = None
    # Queue the "task done" notification and distil the playbook.
    finished: bool = False
    # Queue the "task failed" notification.
    gave_up: bool = False


def append_note(notes: str, session: int, text: str) -> str:
    """The notes with this session's progress added, the oldest cut first past the cap."""
    entry = f"[session {session}] {text.strip()[:REPORT_NOTE_CHARS]}".strip()
    joined = f"{notes.strip()}\n\n{entry}".strip() if notes.strip() else entry
    return joined[-NOTES_CHARS:]


def _next_repeat(task: Task, now: float, tz: Any = None) -> float | None:
    return parse_repeat(task.repeat).next_after(now, tz) if task.repeat else None


def decide(task: Task, report: str, verdict: Verdict, tools: list[dict[str, Any]], now: float,
           tz: Any = None) -> Outcome:
    """What the row becomes after session `task.runs` (already counted by the claim) reported
    `report` with `verdict` (its STATUS line or the judge's)."""
    text = strip_status(report)
    if verdict == "done" and unbacked_file_claim(report, tools):
        verdict, text = "continue", f"{text}\n{REFUSED_NOTE}"
    if verdict == "done":
        again = _next_repeat(task, now, tz)
        if again is not None:
            # A repeating task comes round again with a clean slate.
            return Outcome(status="scheduled", next_run=again, result=text, notes="", runs=0, finished=True)
        return Outcome(status="done", result=text, notes=task.notes, finished=True)
    return unfinished(task, text, now, tz)


def unfinished(task: Task, note: str, now: float, tz: Any = None, error: str | None = None) -> Outcome:
    """Another session a minute later with `note` appended, or, past the cap, failed with the
    notes kept (a repeating task then waits for its next time instead)."""
    session = task.runs
    notes = append_note(task.notes, session, note)
    if session < MAX_SESSIONS:
        return Outcome(status="scheduled", next_run=now + RETRY_SECONDS, notes=notes, error=error)
    reason = error or f"not finished after {MAX_SESSIONS} sessions"
    again = _next_repeat(task, now, tz)
    if again is not None:
        return Outcome(status="scheduled", next_run=again, notes="", runs=0, error=reason, gave_up=True)
    return Outcome(status="failed", notes=notes, error=reason, gave_up=True)
