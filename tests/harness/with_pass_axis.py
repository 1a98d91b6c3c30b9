#!/usr/bin/env python3
"""Writes DST: the result table of SRC twice, with an axis no build has (`pass`, 1 then 2) after
`slots`, so that the tests can check that export, compare and plots/render read a file's axes
from the file. Usage: with_pass_axis.py SRC.h5 DST.h5"""
import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1], "r") as f:
    table, attrs = f["points"][...], dict(f.attrs)
fields = [(n, table.dtype.fields[n][0]) for n in table.dtype.names]
at = [n for n, _ in fields].index("slots") + 1
wide = np.zeros(2 * len(table), dtype=fields[:at] + [("pass", "<i4")] + fields[at:])
for n in table.dtype.names:
    wide[n] = np.concatenate([table[n], table[n]])
wide["pass"] = [1] * len(table) + [2] * len(table)
with h5py.File(sys.argv[2], "w") as f:
    f.create_dataset("points", data=wide)
    f.attrs.update(attrs)
