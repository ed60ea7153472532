"""A data dir deleted (or replaced) under a running broker: its open files would
take acknowledged writes that no restart finds again, and a partition created
afterwards would quietly make a new, empty data dir.  The log dir goes offline
instead (the broker then stops: tests/broker/test_cli.py)."""

from __future__ import annotations

import shutil

import pytest

from kcoord.storage.errors import KafkaStorageError
from kcoord.storage.manager import LogManager


def test_a_deleted_data_dir_takes_the_log_dir_offline(tmp_path):
    data = tmp_path / "data"
    said = []
    manager = LogManager(str(data), on_offline=said.append)
    plog = manager.get_or_create("t", 0)
    assert manager.check_dir()
    shutil.rmtree(data)
    assert not manager.check_dir()
    assert manager.offline and plog.offline
    assert len(said) == 1 and "was deleted or replaced" in said[0]
    assert not manager.check_dir() and len(said) == 1  # said once


def test_a_replaced_data_dir_is_not_taken_for_the_same(tmp_path):
    data = tmp_path / "data"
    manager = LogManager(str(data))
    shutil.rmtree(data)
    data.mkdir()
    assert not manager.check_dir() and manager.offline


def test_a_partition_created_after_the_deletion_makes_no_new_data_dir(tmp_path):
    data = tmp_path / "data"
    said = []
    manager = LogManager(str(data), on_offline=said.append)
    shutil.rmtree(data)
    with pytest.raises(KafkaStorageError):
        manager.get_or_create("t", 0)
    assert not data.exists()
    assert manager.offline and len(said) == 1
