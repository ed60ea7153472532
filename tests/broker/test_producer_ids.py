"""Producer ids come from blocks whose end is on disk before any id of the block
is handed out: a restart never hands out an id again."""

from __future__ import annotations

import asyncio

from kcoord.broker.topics.data import PRODUCER_ID_BLOCK, ProducerIds


def _allocate(data_dir, count):
    ids = ProducerIds(data_dir)
    ids.load()

    async def run():
        return [await ids.allocate() for _ in range(count)]

    return asyncio.run(run()), ids


def test_no_id_is_given_twice_across_restarts_at_block_boundaries(tmp_path):
    first, ids = _allocate(tmp_path, PRODUCER_ID_BLOCK + 1)
    assert first == list(range(PRODUCER_ID_BLOCK + 1))
    assert int(ids.path.read_text()) == 2 * PRODUCER_ID_BLOCK
    again, _ = _allocate(tmp_path, 1)
    assert again == [2 * PRODUCER_ID_BLOCK]
    (tmp_path / "exact").mkdir()
    _, ids = _allocate(tmp_path / "exact", PRODUCER_ID_BLOCK)
    assert int(ids.path.read_text()) == PRODUCER_ID_BLOCK
    assert _allocate(tmp_path / "exact", 1)[0] == [PRODUCER_ID_BLOCK]


def test_an_unreadable_file_never_leads_to_reused_ids(tmp_path):
    (tmp_path / "kcoord-producer-ids").write_text("garbage")
    ids, _ = _allocate(tmp_path, 1)
    assert ids[0] >= 1 << 40
