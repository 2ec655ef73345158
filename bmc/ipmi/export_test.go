package ipmi

// OnUserStep has f called with each step of AddUser, in order.
func OnUserStep(d *Driver, f func(string)) { d.userStep = f }
