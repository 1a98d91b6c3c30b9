"""The harness's Python tools, run through their commands plots/render, experiments/peers and
experiments/measure (thin wrappers that put python/ on sys.path and call the module's main):

  render    result files into figures (render.py)
  peers     public implementations as rows of a result file (peers.py)
  measure   experiments into result files, ours then the peers, a GPU each (measure.py)
  common    what they share: one-line user errors, the result file's columns and rows, the bench check
"""
