"""GPU procurement planner: decide which GPUs to buy and rent, and when."""

__version__ = "0.1.0"
