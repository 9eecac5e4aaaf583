// Package template renders a checkpoint's own Jinja chat template.
package template
