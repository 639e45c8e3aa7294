"""SPD-Faith (suite 5): difference consistency on image pairs with known edits (DQR, DS, TF1, CF1, CR,
DRF) and the SAGE intervention."""
