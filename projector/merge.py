"""How a segment's properties come from its layers: the one home of that rule.

A segment's layers are ordered by their registration in the log. A new layer goes last; a layer
registered again with ``on_duplicate="replace"`` is a new registration, so the fold gives it the
new event's log position and it moves last too (the store lists a segment's layers by that
position). Each property of the segment is the value of the last layer, in that order, that has
one: a replaced layer wins the merge, a layer without the property leaves the earlier value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def segment_properties(per_layer: pa.Table, group: np.ndarray, count: int) -> pa.Table:
    """One row per segment, each property column the value of the segment's last layer that has
    one (null if none has). ``per_layer`` has a row per layer in layer order, ``group`` the
    segment number (0 to ``count - 1``) of each row."""
    rows = np.arange(len(group))
    winners = {}
    for name in per_layer.column_names:
        column = per_layer.column(name)
        valid = ~column.is_null().to_numpy(zero_copy_only=False)
        last = np.full(count, -1)
        np.maximum.at(last, group[valid], rows[valid])
        winners[name] = column.take(pa.array(last, pa.int64(), mask=last < 0))
    return pa.table(winners, schema=per_layer.schema)
