"""Plants the controllers drive: the embedded reduced-model simulator and a MuJoCo model."""
