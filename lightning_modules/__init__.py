"""LightningModules and DataModules for RoMem's two training phases."""
