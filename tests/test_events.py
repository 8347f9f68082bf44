"""Job events are part of the contract (backendmgr.events): the stream's JSON for each is what
the web layer sends (SPEC §7's fields under short names), byte for byte as before."""

from __future__ import annotations

from backendmgr.api_models import VerifyResult, dump
from backendmgr.events import ProgressEvent, VerifiedEvent


def test_progress_events_serialise_as_the_stream_sends_them() -> None:
    event = ProgressEvent("downloading", "a.tar.gz", 10, 100, 12.345, "")
    assert event.as_json() == {
        "phase": "downloading",
        "asset": "a.tar.gz",
        "bytes": 10,
        "total": 100,
        "rate": 12.3,
        "message": "",
    }
    assert ProgressEvent("failed", message="no route").as_json() == {
        "phase": "failed",
        "asset": "",
        "bytes": 0,
        "total": None,
        "rate": 0.0,
        "message": "no route",
    }


def test_a_verified_event_carries_its_line_and_result() -> None:
    result = VerifyResult(
        id="qwen3", ok=True, reason=None, ready_s=0.2, gpu_gib=6.31, est_vram_gb=None
    )
    said = ProgressEvent("verifying", asset="qwen3", message=result.line()).as_json()
    expected = {**said, "phase": "verified", "result": dump(result)}
    assert VerifiedEvent(result).as_json() == expected
    assert expected["message"] == "qwen3: ok in 0.2 s, 6.31 GiB used"
