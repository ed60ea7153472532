"""What ``kcoord groups`` reads from a user: the options that go together (Kafka's
ConsumerGroupCommandOptions.checkArgs, refused before any broker is asked), and
for --reset-offsets times, durations and --from-file plans, read as Kafka's
ConsumerGroupCommand reads them, whatever the machine's time zone."""

from __future__ import annotations

import io
import time

import pytest

from kcoord.broker.cli import _parser
from kcoord.broker.tools.groups import (Failed, Usage, _parse_datetime, _parse_duration_ms,
                                        check_args, read_reset_plan, run)

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


# -- the options that go together (nothing here reaches a broker: port 1 refuses) ------

WARN = "WARN: No action will be performed as the --execute option is missing."


def _checked(*argv: str, bootstrap: bool = True) -> tuple[str | None, str]:
    """What check_args refuses (None: nothing) and what it warns on stderr."""
    args = _parser().parse_args(
        ["groups", *(["--bootstrap-server", "127.0.0.1:1"] if bootstrap else []), *argv])
    err = io.StringIO()
    try:
        check_args(args, err)
    except Usage as exc:
        return str(exc), err.getvalue()
    return None, err.getvalue()


@pytest.mark.parametrize("argv, why", [
    (("--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "5", "--dry-run",
      "--execute"), "Option [reset-offsets] only accepts one of [execute] and [dry-run]"),
    (("--list", "--group", "g"), 'Option "[group]" can\'t be used with option "[list]"'),
    (("--describe", "--group", "g", "--members", "--offsets"),
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    (("--describe", "--group", "g", "--members", "--state"),
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    (("--describe", "--group", "g", "--all-groups"),
     'Option "[group]" can\'t be used with option "[all-groups]"'),
    (("--describe", "--group", "g", "--state", "Stable"),
     "Option [describe] does not take a value for [state]"),
    (("--describe", "--group", "g", "--topic", "t"),
     'Option "[topic]" can\'t be used with option "[describe]"'),
    (("--describe",), "Option [describe] takes one of these options: [all-groups], [group]"),
    (("--delete-offsets", "--group", "g"),
     "Option [delete-offsets] takes the following options: [topic], [group]"),
    (("--delete-offsets", "--all-groups", "--topic", "t"),
     "Option [delete-offsets] takes the following options: [topic], [group]"),
    (("--delete", "--group", "g", "--topic", "t"),
     "The consumer does not support topic-specific offset deletion from a consumer group."),
    (("--delete", "--all-groups", "--group", "g"),
     'Option "[group]" can\'t be used with option "[all-groups]"'),
    (("--list", "--topic", "t"), 'Option "[topic]" can\'t be used with option "[list]"'),
    (("--list", "--verbose", "--members"), 'Exception in thread "main" '
     "joptsimple.UnavailableOptionException: Option(s) [members, verbose] are unavailable "
     "given other options on the command line"),
    (("--delete", "--group", "g", "--type", "--state"), 'Exception in thread "main" '
     "joptsimple.UnavailableOptionException: Option(s) [state, type] are unavailable given "
     "other options on the command line"),
    (("--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "0", "--shift-by", "1",
      "--dry-run"), 'Option "[to-offset]" can\'t be used with option "[shift-by]"'),
    (("--reset-offsets", "--group", "g", "--from-file", "f", "--to-latest", "--dry-run"),
     'Option "[to-latest]" can\'t be used with option "[from-file]"'),
    (("--reset-offsets", "--all-topics", "--to-earliest", "--execute"),
     "Option [reset-offsets] takes one of these options: [all-groups], [group]"),
])
def test_options_that_do_not_go_together_are_refused_in_kafka_s_words(argv, why):
    assert _checked(*argv) == (why, "")


def test_a_missing_bootstrap_server_is_refused_unless_validating_a_regex():
    assert _checked("--list", bootstrap=False)[0] == \
        'Missing required argument "[bootstrap-server]"'
    assert _checked("--validate-regex", "a.*", bootstrap=False) == (None, "")


def test_a_reset_without_execute_or_dry_run_warns_before_other_checks():
    why, warned = _checked("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest",
                           "--to-latest")
    assert why == 'Option "[to-earliest]" can\'t be used with option "[to-latest]"'
    assert warned.startswith(WARN)
    assert _checked("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest",
                    "--execute") == (None, "")


@pytest.mark.parametrize("argv", [
    ("--describe", "--group", "g", "--state", "--verbose"),
    ("--describe", "--all-groups", "--offsets", "--verbose"),
    ("--list", "--state", "Stable", "--type"),
    ("--delete-offsets", "--group", "g", "--topic", "t", "--all-topics"),
    ("--reset-offsets", "--group", "g", "--group", "h", "--topic", "t", "--to-offset", "0",
     "--execute"),
    ("--list", "--dry-run", "--all-topics"),  # Kafka's tool ignores them with --list
])
def test_options_that_go_together_pass(argv):
    assert _checked(*argv) == (None, "")


def _run(*argv: str) -> tuple[int, str, str]:
    args = _parser().parse_args(["groups", *argv])
    out, err = io.StringIO(), io.StringIO()
    return run(args, out, err), out.getvalue(), err.getvalue()


def test_a_refused_command_exits_1_without_asking_a_broker():
    # Port 1 refuses connections: a command that got that far would say so on stdout.
    code, out, err = _run("--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group",
                          "g", "--all-topics", "--to-offset", "5", "--dry-run", "--execute")
    assert (code, out) == (1, "")
    assert err == "Option [reset-offsets] only accepts one of [execute] and [dry-run]\n"


def test_exactly_one_action_counts_validate_regex():
    code, out, err = _run("--bootstrap-server", "127.0.0.1:1", "--list", "--validate-regex", "a")
    assert (code, out) == (1, "")
    assert err == ("Command must include exactly one action: --list, --describe, --delete, "
                   "--reset-offsets, --delete-offsets, --validate-regex\n")


@pytest.mark.parametrize("regex, said", [
    ("orders-.*", "The regular expression `orders-.*` is valid."),
    ("(orders", "The regular expression `(orders` is invalid: missing closing )."),
    ("a{2,1}", "The regular expression `a{2,1}` is invalid: invalid repeat count."),
])
def test_validate_regex_says_what_re2j_says(regex, said):
    assert _run("--validate-regex", regex) == (0, said + "\n", "")
