"""The local daemon (``cairn serve``) and what its clients need to reach it."""
