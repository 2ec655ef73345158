package bootevents

import (
	"encoding/json"

	"github.com/bettercompute/siteboot/hwid"
)

// eventJSON is Event on the wire: arch and uuid present only when the event has them.
type eventJSON struct {
	eventFields
	Arch *hwid.Arch `json:"arch,omitempty"`
	UUID *hwid.UUID `json:"uuid,omitempty"`
}

type eventFields Event // Event's fields without its methods

// MarshalJSON encodes e as an object; "arch" and "uuid" appear only when e has them.
func (e Event) MarshalJSON() ([]byte, error) {
	w := eventJSON{eventFields: eventFields(e)}
	if e.HasArch {
		w.Arch = &e.Arch
	}
	if e.HasUUID {
		w.UUID = &e.UUID
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes MarshalJSON's form.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w eventJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Event(w.eventFields)
	if w.Arch != nil {
		e.Arch, e.HasArch = *w.Arch, true
	}
	if w.UUID != nil {
		e.UUID, e.HasUUID = *w.UUID, true
	}
	return nil
}
