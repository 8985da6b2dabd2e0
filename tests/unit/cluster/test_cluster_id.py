"""KRaft cluster ids: the storage tool reads an id that starts with "-" as an option."""

from __future__ import annotations

import base64

from chaos.cluster.single import new_cluster_id


def test_cluster_ids_never_start_with_a_dash_and_decode_to_16_bytes() -> None:
    ids = [new_cluster_id() for _ in range(5000)]  # 1 in 64 started with "-" before the fix
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)
