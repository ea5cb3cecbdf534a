"""Workers: the projection runner, replays, and (later) erasure jobs and schedules."""
