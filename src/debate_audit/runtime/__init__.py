"""What every job runs in: its log and provenance, the hub offline, its GPUs, the run records."""
