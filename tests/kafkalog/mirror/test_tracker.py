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
