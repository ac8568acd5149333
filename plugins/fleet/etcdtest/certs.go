package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs are the PEM files of a test PKI that WriteCerts makes: a CA, a
// server certificate for 127.0.0.1 and localhost, and a client
// certificate, each with its key.
type Certs struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// certValidity is how long the certificates of WriteCerts are valid, from
// an hour before they are made.
const certValidity = 24 * time.Hour

// WriteCerts makes a new CA, a server and a client certificate signed by
// it (ECDSA P-256), and writes them to dir, 0600. The CA of one call does
// not sign the certificates of another.
func WriteCerts(dir string) (Certs, error) {
	c := Certs{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certs{}, fmt.Errorf("CA key: %w", err)
	}
	ca := template("etcdtest CA")
	ca.IsCA, ca.BasicConstraintsValid = true, true
	ca.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return Certs{}, fmt.Errorf("CA certificate: %w", err)
	}
	if err := writePEM(c.CA, "CERTIFICATE", caDER); err != nil {
		return Certs{}, err
	}
	// etcd dials itself (the gRPC gateway) with its server certificate,
	// so that one is a client's too.
	server := template("etcdtest server")
	server.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	server.IPAddresses, server.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
	client := template("etcdtest client")
	client.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, leaf := range []struct {
		tmpl              *x509.Certificate
		certPath, keyPath string
	}{{server, c.ServerCert, c.ServerKey}, {client, c.ClientCert, c.ClientKey}} {
		if err := writeLeaf(leaf.tmpl, ca, caKey, leaf.certPath, leaf.keyPath); err != nil {
			return Certs{}, err
		}
	}
	return c, nil
}

// template returns a certificate template named cn, valid for
// certValidity from an hour ago, with a random serial number.
func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// writeLeaf makes a key and the certificate of tmpl signed by ca, and
// writes both.
func writeLeaf(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("%s key: %w", tmpl.Subject.CommonName, err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("%s certificate: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("%s key: %w", tmpl.Subject.CommonName, err)
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
