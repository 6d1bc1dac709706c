"""Fix prototypes, one unified diff per bug and library (`<library>/<case-id>.diff`): package data, installed
as `minrepro.patches`. `minrepro.envs.patching` reads and applies them; nothing here is code."""
