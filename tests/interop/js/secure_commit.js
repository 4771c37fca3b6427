// kafkajs over TLS, with SASL or with a client certificate (mTLS): consumes
// 5 messages in a group, commits offset 5 and prints what admin.fetchOffsets
// returns.
// Arguments: bootstrap group topic ca.pem mechanism user password
//   mechanism is scram-sha-256, scram-sha-512 or plain (user and password
//   are then the SASL login), mtls (user and password are then the client
//   certificate and key files), or oauthbearer (user is then the token).
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')
const [bootstrap, group, topic, caFile, mechanism, user, password] = process.argv.slice(2)

function security () {
  const ssl = { ca: [fs.readFileSync(caFile, 'utf-8')], servername: 'localhost' }
  if (mechanism === 'mtls') {
    return { ssl: { ...ssl, cert: fs.readFileSync(user, 'utf-8'), key: fs.readFileSync(password, 'utf-8') } }
  }
  if (mechanism === 'oauthbearer') {
    return { ssl, sasl: { mechanism, oauthBearerProvider: async () => ({ value: user }) } }
  }
  return { ssl, sasl: { mechanism, username: user, password } }
}

async function main () {
  const kafka = new Kafka({
    clientId: 'kcoord-interop-js-secure',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    ...security()
  })
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await new Promise((resolve, reject) => {
    let seen = 0
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition }) => {
        seen += 1
        if (seen === 5) {
          await consumer.commitOffsets([{ topic, partition, offset: '5' }])
          resolve()
        }
      }
    }).catch(reject)
    setTimeout(() => reject(new Error('timed out')), 60000)
  })
  await consumer.disconnect()
  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  await admin.disconnect()
  console.log(JSON.stringify({ fetched: offsets[0].partitions.map(p => ({ partition: p.partition, offset: Number(p.offset) })) }))
}

main().catch(e => { console.error(e); process.exit(1) })
