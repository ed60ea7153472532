"""What ``kcoord groups --reset-offsets`` reads from a user: times, durations and
--from-file plans, read as Kafka's ConsumerGroupCommand reads them, whatever the
machine's time zone."""

from __future__ import annotations

import time

import pytest

from kcoord.broker.tools.groups import Failed, _parse_datetime, _parse_duration_ms, read_reset_plan

MIDNIGHT_2000_UTC = 946_684_800_000


@pytest.fixture
def far_time_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("text, millis", [
    ("2000-01-01T00:00:00.000", MIDNIGHT_2000_UTC),  # no zone: UTC, as Kafka appends Z
    ("2000-01-01T00:00:00.000Z", MIDNIGHT_2000_UTC),
    ("2000-01-01T09:00:00.000+09:00", MIDNIGHT_2000_UTC),
    ("2000-01-01T09:00:00.000+0900", MIDNIGHT_2000_UTC),
    ("1999-12-31T23:00:00.250-01", MIDNIGHT_2000_UTC + 250),
])
def test_times_are_read_as_kafka_reads_them_in_any_local_zone(far_time_zone, text, millis):
    assert _parse_datetime(text) == millis


@pytest.mark.parametrize("text, why", [
    ("yesterday", "It does not contain a 'T' according to ISO8601 format"),
    ("2000-01-01T00:00:00", 'Unparseable date: "2000-01-01T00:00:00Z"'),
    ("2000-02-30T00:00:00.000Z", 'Unparseable date: "2000-02-30T00:00:00.000Z"'),
])
def test_a_time_kafka_cannot_read_is_refused_in_its_words(text, why):
    with pytest.raises(Failed, match=why):
        _parse_datetime(text)


def test_durations_as_java_reads_them():
    assert _parse_duration_ms("PT1H") == 3_600_000
    assert _parse_duration_ms("P1DT0.5S") == 86_400_500
    assert _parse_duration_ms("-PT2M") == -120_000
    with pytest.raises(Failed, match="^Text cannot be parsed to a Duration$"):
        _parse_duration_ms("an hour")


def _plan(tmp_path, text, groups):
    path = tmp_path / "plan.csv"
    path.write_text(text)
    return read_reset_plan(str(path), groups)


def test_a_plan_without_groups_is_the_one_group_s(tmp_path):
    assert _plan(tmp_path, "orders,0,5\r\norders,1,7\n", ["g"]) == \
        {"g": {("orders", 0): 5, ("orders", 1): 7}}


def test_a_one_line_plan_and_a_negative_offset(tmp_path):
    # A negative offset is read as written; planning then keeps it within the log.
    assert _plan(tmp_path, "orders,2,-1", ["g"]) == {"g": {("orders", 2): -1}}
    assert _plan(tmp_path, "g,orders,2,-3\n", ["g"]) == {"g": {("orders", 2): -3}}


def test_what_export_writes_is_a_plan(tmp_path):
    # --export ends with a blank line, as Kafka's does; Kafka's reader drops
    # trailing empty lines (Java's split), an empty line inside is an error.
    assert _plan(tmp_path, "orders,0,5\norders,1,7\n\n", ["g"]) == \
        {"g": {("orders", 0): 5, ("orders", 1): 7}}
    assert _plan(tmp_path, "\n\n", ["g"]) == {}


def test_a_plan_with_groups_names_each_group_s_offsets(tmp_path):
    text = "g1,orders,0,5\ng2,orders,0,9\ng1,orders,1,3\n"
    assert _plan(tmp_path, text, ["g1", "g2"]) == \
        {"g1": {("orders", 0): 5, ("orders", 1): 3}, "g2": {("orders", 0): 9}}
    # One group named, lines with groups: still read with their groups.
    assert _plan(tmp_path, text, ["g2"])["g2"] == {("orders", 0): 9}


def test_three_columns_for_several_groups_are_read_as_group_topic_partition(tmp_path):
    # Kafka's reader takes "orders,0,5" as group "orders", topic "0", partition 5:
    # no plan for either group named.
    assert _plan(tmp_path, "orders,0,5\n", ["g1", "g2"]) == {"orders": {("0", 5): 0}}


@pytest.mark.parametrize("text, why", [
    ("", "No content to map due to end-of-input"),
    ("orders,0,1\n\norders,1,2\n", "No content to map due to end-of-input"),
    ("g,orders,x,1\n", "'x' .* is not a number"),
    ("g,orders,0,1,9\n", "too many entries"),
])
def test_a_plan_kafka_cannot_read_is_refused(tmp_path, text, why):
    with pytest.raises(Failed, match=why):
        _plan(tmp_path, text, ["g"])


def test_a_plan_that_is_not_utf8_is_refused_not_a_crash(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_bytes(b"orders,0,\xff\xfe\n")
    with pytest.raises(Failed, match="is not UTF-8 text"):
        read_reset_plan(str(path), ["g"])


def test_a_missing_plan_file_is_named(tmp_path):
    with pytest.raises(Failed, match=f"Unable to read file {tmp_path}/nope.csv"):
        read_reset_plan(str(tmp_path / "nope.csv"), ["g"])
