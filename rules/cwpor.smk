# Rules for this stage are added by its owner; see DESIGN.md.
