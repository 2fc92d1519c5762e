//! Consumer notification objects (CNO): pure trigger/wait logic.
