"""Training physics, by concern (``planner.physics.train`` re-exports the public names):

* :mod:`.compute` - FLOPs per token, the single-GPU MFU, the FP8 step;
* :mod:`.links` - collectives, expert all-to-alls over scale-up and scale-out links, pipeline
  schedules (1F1B, interleaved, zero-bubble, DualPipe);
* :mod:`.memory` - model states and activations per GPU (MoE layers included);
* :mod:`.layout` - one layout's step time and the search for the fastest;
* :mod:`.estimate` - the job's hours, steady and realized, with the band;
* :mod:`.builders` - bare-number GPUs and models (tests, what-ifs), the derived H800.
"""
