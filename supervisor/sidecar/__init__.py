"""The exec wrapper's old home, kept so client configs wrapped before the rename still start."""
