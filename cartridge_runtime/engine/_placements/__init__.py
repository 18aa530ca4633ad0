"""Where an instance runs: the placement seam, a local subprocess, or this process."""
