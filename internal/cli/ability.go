package cli

import (
	"crypto/ed25519"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lloyal-ai/lloyal/abilities"
	"github.com/lloyal-ai/lloyal/trace"
)

func newAbilityCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ability",
		Short: "Install, trust, list, enable, disable, remove and sign abilities (MCP tool bundles)",
		Long: `An ability is a bundle of tools a user installs: a folder (or a .tar.gz
of one) with a manifest, ability.json, naming an MCP server (stdio or
streamable HTTP), instructions for the agents that use it and a settings
schema. Bundles are signed: install verifies the signature against the keys
you trust and refuses anything else unless --allow-unsigned.

Installed abilities live under $XDG_DATA_HOME/lloyal/abilities; settings in
$XDG_CONFIG_HOME/lloyal/abilities/NAME.json. lloyal run loads the enabled
ones (or those named with --ability).`,
	}
	cmd.AddCommand(newAbilityInstallCmd(),
		storeCmd("trust KEYFILE", "Trust an author's Ed25519 public key (PEM) for installs", func(s *abilities.Store, arg string) (string, error) {
			id, err := s.Trust(arg)
			return "trusted key " + id, err
		}),
		newAbilityListCmd(),
		storeCmd("enable NAME", "Enable an ability (loaded by lloyal run)", func(s *abilities.Store, name string) (string, error) {
			return name + " enabled", s.SetEnabled(name, true)
		}),
		storeCmd("disable NAME", "Disable an ability (lloyal run loads it only with --ability)", func(s *abilities.Store, name string) (string, error) {
			return name + " disabled", s.SetEnabled(name, false)
		}),
		storeCmd("remove NAME", "Uninstall an ability (its settings file stays)", func(s *abilities.Store, name string) (string, error) {
			return "removed " + name, s.Remove(name)
		}),
		newAbilitySignCmd(), newAbilityKeygenCmd())
	return cmd
}

// storeCmd is an ability command that does one thing to the user's store
// with its one argument and says what it did.
func storeCmd(use, short string, do func(s *abilities.Store, arg string) (string, error)) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := abilities.DefaultStore()
			if err != nil {
				return err
			}
			did, err := do(s, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), did)
			return nil
		}}
}

func newAbilityInstallCmd() *cobra.Command {
	var allowUnsigned bool
	install := &cobra.Command{
		Use:   "install PATH",
		Short: "Verify a bundle's signature and install it (enabled)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := abilities.DefaultStore()
			if err != nil {
				return err
			}
			rec, err := s.Install(args[0], allowUnsigned)
			if err != nil {
				return err
			}
			if rec.Unverified != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: installed without a valid signature (--allow-unsigned): %s\n", rec.Unverified)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s %s (%s), enabled\n", rec.Name, rec.Version, trace.SignedBy(rec.Key))
			return nil
		},
	}
	install.Flags().BoolVar(&allowUnsigned, "allow-unsigned", false, "install a bundle whose signature is missing or does not verify")
	return install
}

func newAbilityListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List installed abilities",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := abilities.DefaultStore()
			if err != nil {
				return err
			}
			recs, err := s.List()
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no abilities installed (lloyal ability install PATH)")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tSTATE\tSIGNED BY")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Version, map[bool]string{true: "enabled", false: "disabled"}[r.Enabled], r.Signer())
			}
			return tw.Flush()
		},
	}
}

func newAbilitySignCmd() *cobra.Command {
	var keyFile string
	sign := &cobra.Command{
		Use:   "sign PATH",
		Short: "Sign a bundle folder (for authors): writes PATH/ability.sig",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := abilities.ReadPrivateKey(keyFile)
			if err != nil {
				return err
			}
			b, p, err := abilities.SignFolder(args[0], key)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s %s with key %s: %s\n", b.Manifest.Name, b.Manifest.Version, abilities.KeyID(key.Public().(ed25519.PublicKey)), p)
			return nil
		},
	}
	sign.Flags().StringVar(&keyFile, "key", "", "your Ed25519 private key (PEM, from lloyal ability keygen)")
	_ = sign.MarkFlagRequired("key")
	return sign
}

func newAbilityKeygenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen FILE",
		Short: "Make a signing key pair (for authors): FILE (private) and FILE.pub",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := abilities.GenerateKey(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "key %s: private %s (keep it secret), public %s.pub (give it to users)\n", abilities.KeyID(pub), args[0], args[0])
			return nil
		},
	}
}
