"""AckTracker: the offset committed never passes a send the target has not acknowledged, whether a
send is one message or a range of offsets forwarded as one message set."""

from __future__ import annotations

from kafkalog.mirror.tracker import AckTracker

TP = ("events", 0)


def test_ranges_settled_out_of_order_commit_only_up_to_the_lowest_unacknowledged() -> None:
    tracker = AckTracker()
    assert tracker.safe(TP) is None, "nothing sent: nothing to commit"
    tracker.sent(TP, 0, 99)  # a forwarded set
    tracker.sent(TP, 100)  # a re-encoded message
    tracker.sent(TP, 101, 149)
    assert tracker.in_flight() == 150 and tracker.safe(TP) == 0
    tracker.settled(TP, 101, None)
    assert tracker.safe(TP) == 0, "a later range acknowledged first moves nothing"
    tracker.settled(TP, 0, None)
    assert tracker.safe(TP) == 100 and tracker.acked == 149 and tracker.in_flight() == 1
    tracker.settled(TP, 100, None)
    assert tracker.safe(TP) == 150 and tracker.acked == 150
    assert tracker.safe_positions({TP: 200, ("other", 0): 5}) == {TP: 150}


def test_a_refused_range_holds_the_commit_before_it_for_good() -> None:
    tracker = AckTracker()
    tracker.sent(TP, 10, 19)
    tracker.sent(TP, 20, 29)
    tracker.settled(TP, 10, RuntimeError("target gone"))
    tracker.settled(TP, 20, None)
    assert tracker.safe(TP) == 10 and tracker.acked == 10
    assert tracker.failure is not None and str(tracker.failure) == "events-0 offset 10: target gone"


def test_offsets_with_nothing_to_send_are_passed_once_the_sends_before_them_are_acknowledged() -> None:
    """A read-committed chunk of 0..9: messages 0-2 sent, 3 a marker, 4-8 aborted, 9 an abort marker."""
    tracker = AckTracker()
    tracker.passed(("other", 0), 5)  # a chunk of markers only: safe at once
    assert tracker.safe(("other", 0)) == 5
    tracker.sent(TP, 0)
    tracker.sent(TP, 1, 2)
    tracker.passed(TP, 10)
    assert tracker.safe(TP) == 0, "the skipped offsets wait for the sends before them"
    tracker.settled(TP, 1, None)
    assert tracker.safe(TP) == 0
    tracker.settled(TP, 0, None)
    assert tracker.safe(TP) == 10 and tracker.acked == 3
    tracker.passed(TP, 7)  # never backwards
    tracker.sent(TP, 10)
    assert tracker.safe(TP) == 10
    tracker.settled(TP, 10, None)
    assert tracker.safe(TP) == 11
