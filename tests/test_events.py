"""Job events are part of the contract (backendmgr.events): the stream's JSON for each is what
the web layer sends today, so moving web onto them changes no byte."""

from __future__ import annotations

from backendmgr.api_models import VerifyResult, dump
from backendmgr.events import ProgressEvent, VerifiedEvent
from backendmgr.web.jobs import event_json


def test_progress_events_serialise_as_the_stream_sends_them() -> None:
    events = [
        ProgressEvent("downloading", "a.tar.gz", 10, 100, 12.345, ""),
        ProgressEvent("failed", message="no route"),
        ProgressEvent("cancelled"),
    ]
    for event in events:
        assert event.as_json() == event_json(event)


def test_a_verified_event_carries_its_line_and_result() -> None:
    result = VerifyResult(
        id="qwen3", ok=True, reason=None, ready_s=0.2, gpu_gib=6.31, est_vram_gb=None
    )
    said = event_json(ProgressEvent("verifying", asset="qwen3", message=result.line()))
    expected = {**said, "phase": "verified", "result": dump(result)}
    assert VerifiedEvent(result).as_json() == expected
    assert expected["message"] == "qwen3: ok in 0.2 s, 6.31 GiB used"
