"""The GLOVE verifier (drift detection, relative truth, realignment), its calibrated detector,
and the memory rules it is compared with (as rules and as read views over one store).

May import ``core.memory``.
"""
